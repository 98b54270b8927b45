import { BadRequestError, echo, type EngineRouting } from '@triad/request';

/** The request fields that carry vLLM's hand-offs between stages, which the gateway makes on pd and epd servers. */
const HANDOFF_FIELDS = ['kv_transfer_params', 'ec_transfer_params'] as const;

/**
 * Refuses a client's `kv_transfer_params` or `ec_transfer_params` for a vLLM pd or epd server. They are the
 * prefill→decode and encoder→consumer hand-offs, which the gateway makes: taken from a client they would make a
 * decode or EC consumer connect to whatever host and port they name (NIXL side channel, Mooncake bootstrap
 * `/query`, an EC peer), make a prefill hold KV for a decode that never comes, or load another request's KV.
 * Aggregated servers get them as sent (no stage hand-off to protect).
 */
export function refuseClientHandoffParams(body: Record<string, unknown>, model: string, routing: EngineRouting): void {
  const field = HANDOFF_FIELDS.find((f) => body[f] !== undefined);
  if (field === undefined) return;
  throw new BadRequestError(
    `'${field}' is set by the gateway for model '${echo(model)}' (ModelServer ${routing.namespace}/${routing.serverName}, ` +
      `vLLM ${routing.server.mode}): it carries the hand-off between the engines of one request, so a client may not send it`,
    field,
  );
}
