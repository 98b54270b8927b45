export const extra = 1;
