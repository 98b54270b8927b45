export const util = 1;
