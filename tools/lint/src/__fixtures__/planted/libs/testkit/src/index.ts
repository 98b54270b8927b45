export const testkit = 1;
