/**
 * What one position of an attribute list was the last time a list of its kind was encoded: the key with its
 * cached KeyValue head, and, while the values there repeat, the last value with its whole encoded KeyValue. The
 * gateway builds each span's attributes in a fixed order (`triad.stage`, then the namespace, …), and most values
 * repeat from request to request (the stage, the model, the route, the status code), so the encoder checks a key
 * and a value with two comparisons and copies one chunk instead of looking the key up in a Map and encoding the
 * value again.
 */
export class AttributeSlot {
  /** The last value, when `encoded` is its KeyValue. */
  value: unknown = undefined;
  /** The KeyValue (length prefix included, field tag not) of `key` and `value`; undefined while values change. */
  encoded: Uint8Array | undefined = undefined;
  /** Keys and values replaced here: past `MAX_SLOT_CHANGES` no value is kept (each would be copied once and dropped). */
  changes = 0;

  constructor(
    public key: string,
    public head: Uint8Array,
  ) {}

  /** Whether a KeyValue just written here may be kept for the next list. */
  get keeps(): boolean {
    return this.changes < MAX_SLOT_CHANGES;
  }

  /** Another key at this position: its head, and no value yet. */
  rekey(key: string, head: Uint8Array): void {
    this.key = key;
    this.head = head;
    this.value = undefined;
    this.encoded = undefined;
    this.changes++;
  }

  /** Another value for the same key: the kept KeyValue no longer applies. */
  forget(): void {
    this.value = undefined;
    this.encoded = undefined;
    this.changes++;
  }
}

/**
 * Slot changes after which a position keeps no more values: a per-request value (a request id, a token count) stops
 * costing a copy per span after a few requests, a value that changes rarely (an error status) does not.
 */
export const MAX_SLOT_CHANGES = 8;

/** Positions remembered per list: the gateway's spans carry at most about twenty attributes. */
export const MAX_SLOTS = 64;

/** The longest KeyValue kept: longer values are not names nor enum-like, and would not repeat. */
export const MAX_KEPT_BYTES = 256;

/** The slots of one kind of attribute list (the attributes of spans of one name, of the resource, …). */
export class AttributeMemo {
  readonly slots: AttributeSlot[] = [];
}
