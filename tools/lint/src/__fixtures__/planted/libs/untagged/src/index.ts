export const untagged = 1;
