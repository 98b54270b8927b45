export const bus = 1;
