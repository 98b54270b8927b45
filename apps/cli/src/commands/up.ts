/** `triad up`: not built yet (see the issue that owns it). */
export async function main(_argv: readonly string[]): Promise<void> {
  throw new Error('triad up is not implemented yet');
}
