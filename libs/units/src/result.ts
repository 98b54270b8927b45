/** A setting read from text: its value in base units (milliseconds, bytes), or why it is not one. */
export type UnitResult = { readonly ok: true; readonly value: number } | { readonly ok: false; readonly error: string };
