/** A slot's `value` while it keeps none: a private symbol, so no attribute value is ever `===` to it. */
export const NOT_KEPT: unique symbol = Symbol('not kept');

/**
 * What one position of an attribute list was the last time a list of its kind was encoded: the key with its
 * cached KeyValue head, and, while the values there repeat, the last value, whose encoded attribute (field tag and
 * KeyValue) sits in the memo's block at `at`…`end`. The gateway builds each span's attributes in a fixed order
 * (`triad.stage`, then the namespace, …), and most values repeat from request to request (the stage, the model,
 * the route, the status code), so the encoder checks a key and a value with two comparisons and copies instead of
 * looking the key up in a Map and encoding the value again.
 */
export class AttributeSlot {
  /** The last value, when the block holds its attribute; `NOT_KEPT` otherwise. */
  value: unknown = NOT_KEPT;
  /** Where the kept attribute starts and ends in the memo's block (in the output, while `fresh`). */
  at = 0;
  end = 0;
  /** Encoded in this pass and not yet moved into the block: `at`…`end` are positions in the output. */
  fresh = false;
  /**
   * The block's bytes from `at` to the end of the last run of kept attributes copied from here, as a view made
   * once: the same runs come back span after span, and `subarray` makes an object per call.
   */
  run: Uint8Array | undefined = undefined;
  /** Keys and values replaced here: past `MAX_SLOT_CHANGES` no value is kept (each would rebuild the block). */
  changes = 0;

  constructor(
    public key: string,
    public head: Uint8Array,
  ) {}

  /** Whether an attribute just written here may be kept for the next list. */
  get keeps(): boolean {
    return this.changes < MAX_SLOT_CHANGES;
  }
}

/**
 * Slot changes after which a position keeps no more values: a per-request value (a request id, a token count) stops
 * rebuilding the block after a few requests, a value that changes rarely (an error status) does not.
 */
export const MAX_SLOT_CHANGES = 8;

/** Positions remembered per list: the gateway's spans carry at most about twenty attributes. */
export const MAX_SLOTS = 64;

/** The longest attribute kept: longer values are not names nor enum-like, and would not repeat. */
export const MAX_KEPT_BYTES = 256;

const EMPTY = new Uint8Array(0);

/** `%TypedArray%.prototype.set`, read once (an inline-cache call per use otherwise; see ProtoBuffer's `raw`). */
const typedArraySet = Uint8Array.prototype.set;

/**
 * The slots of one kind of attribute list (the attributes of spans of one name, of the resource, …) and one block
 * with the kept attributes, encoded, in position order. Positions kept in a row are next to each other in the
 * block, so a run of attributes that repeat is one copy, however many attributes it holds. A position whose
 * values change is left out of the block (once past its changes), so the block stays as it is while the same
 * values come back, and a list whose attributes repeat costs no write to the memo.
 */
export class AttributeMemo {
  readonly slots: AttributeSlot[] = [];
  /** The kept attributes, each its field tag and KeyValue, in position order. */
  block: Uint8Array = EMPTY;
  /** The field tag the block's attributes were written under (a span's 9, an event's 3, …). */
  tag = -1;

  /** Forgets every kept attribute: a list under another field's tag (a span and an event of one name). */
  restart(tag: number): void {
    this.tag = tag;
    this.slots.length = 0;
    this.block = EMPTY;
  }

  /**
   * After a pass that kept a new attribute or dropped one the block held: a new block of every kept attribute,
   * from the output (`fresh` slots) or the old block, in position order.
   */
  rebuild(output: Uint8Array): void {
    const slots = this.slots;
    let size = 0;
    for (const slot of slots) if (slot.value !== NOT_KEPT) size += slot.end - slot.at;
    const block = new Uint8Array(size);
    const old = this.block;
    let p = 0;
    for (const slot of slots) {
      slot.run = undefined;
      if (slot.value === NOT_KEPT) {
        slot.fresh = false;
        continue;
      }
      const n = slot.end - slot.at;
      typedArraySet.call(block, (slot.fresh ? output : old).subarray(slot.at, slot.end), p);
      slot.fresh = false;
      slot.at = p;
      slot.end = p += n;
    }
    this.block = block;
  }
}
