/**
 * Removes `list[i]`, moving the later elements down one: what `splice(i, 1)` does for the few elements of a
 * request's legs, without a builtin call and the array it returns (a few hundred instructions per call).
 */
export function removeAt<T>(list: T[], i: number): void {
  for (let j = i + 1; j < list.length; j++) list[j - 1] = list[j];
  list.pop();
}
