// Blocking HTTP over the `wasi:http` imports of the infrastructure world,
// with the Rust SDK's timeouts and mapping of failures to provider errors.

import { handle } from 'wasi:http/outgoing-handler@0.2.12';
import {
  Fields,
  OutgoingRequest,
  OutgoingBody,
  IncomingBody,
  RequestOptions,
  type ErrorCode,
  type Method,
} from 'wasi:http/types@0.2.12';

import { ProviderFailure, RetryAfter, Terminal } from './capwasm-provider.ts';

export const DEFAULT_RETRY_SECONDS = 15;
const MAX_RETRY_SECONDS = 3600;
const MAX_RESPONSE_BYTES = 16 << 20;
const NANOS = 1_000_000_000n;
const WRITE_CHUNK = 4096;
const READ_CHUNK = 65536n;
const ERROR_BODY_SNIPPET = 512;
const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** `value` percent-encoded for a path segment or a query value. */
export function encodeComponent(value: string): string {
  let out = '';
  for (const byte of new TextEncoder().encode(value)) {
    const c = String.fromCharCode(byte);
    out += byte < 0x80 && UNRESERVED.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** An http(s) URL with a host, no user info, query or fragment. */
export function isBaseUrl(url: string): boolean {
  for (const scheme of ['http://', 'https://']) {
    if (url.startsWith(scheme)) {
      const host = url.slice(scheme.length).split('/')[0];
      return host !== '' && !host.includes('@') && !/[?#]/.test(url) && !/[\s\u0000-\u001f\u007f-\u009f]/.test(url);
    }
  }
  return false;
}

const DESCRIPTIONS: Partial<Record<ErrorCode['tag'], string>> = {
  'HTTP-request-denied': 'the host denied the request (destination not allowed for this provider)',
  'destination-IP-prohibited': 'the destination IP is prohibited',
  'connection-refused': 'connection refused',
  'connection-timeout': 'connection timed out',
  'connection-terminated': 'connection terminated',
  'DNS-timeout': 'DNS lookup timed out',
  'destination-not-found': 'destination not found',
  'destination-unavailable': 'destination unavailable',
  'HTTP-response-timeout': 'response timed out',
  'connection-read-timeout': "no answer in time (the connection's read timed out)",
  'connection-write-timeout': "the request could not be sent in time (the connection's write timed out)",
  'connection-limit-reached': "the host's budget for outgoing requests is used up (requests per call, or in flight)",
};
const DENIED = new Set<ErrorCode['tag']>(['HTTP-request-denied', 'destination-IP-prohibited']);
const INVALID = new Set<ErrorCode['tag']>([
  'HTTP-request-method-invalid', 'HTTP-request-URI-invalid', 'HTTP-request-URI-too-long',
  'HTTP-request-header-section-size', 'HTTP-request-header-size', 'HTTP-request-body-size',
  'HTTP-request-length-required', 'configuration-error',
]);

function failureOf(prefix: string, code: ErrorCode): ProviderFailure {
  const what = prefix + (DESCRIPTIONS[code.tag] ?? code.tag);
  if (DENIED.has(code.tag)) return new Terminal('HttpRequestDenied', what);
  if (INVALID.has(code.tag)) return new Terminal('InvalidRequest', what);
  if (code.tag === 'HTTP-response-body-size') return new Terminal('ResponseTooLarge', what);
  return new RetryAfter(DEFAULT_RETRY_SECONDS, what);
}

/** The WIT error a failed import threw (componentize-js puts it in `payload`). */
function payloadOf(error: unknown): { tag?: unknown } | undefined {
  return (error as { payload?: { tag?: unknown } } | null)?.payload;
}

/** What failed, for a message: the WIT error's case, or the error itself. */
function whatFailed(error: unknown): string {
  const tag = payloadOf(error)?.tag;
  return typeof tag === 'string' ? tag : String(error);
}

/** A response header: its name and raw value. */
export type Header = [string, Uint8Array];

/** A whole response: `status`, `headers` and `body` (bytes). */
export class Response {
  readonly method: string;
  readonly url: string;
  readonly status: number;
  readonly headers: Header[];
  readonly body: Uint8Array;
  constructor(method: string, url: string, status: number, headers: Header[], body: Uint8Array) {
    this.method = method;
    this.url = url;
    this.status = status;
    this.headers = headers;
    this.body = body;
  }
  header(name: string): string | undefined {
    const found = this.headers.find(([k]) => k.toLowerCase() === name.toLowerCase());
    return found ? new TextDecoder().decode(found[1]) : undefined;
  }
  json(): unknown {
    try {
      return JSON.parse(new TextDecoder().decode(this.body));
    } catch (error) {
      throw new Terminal('InvalidResponse', `${this.method} ${this.url} returned a body that does not decode: ${(error as Error).message}`);
    }
  }
  errorForStatus(): Response {
    if (this.status >= 200 && this.status < 300) return this;
    const snippet = new TextDecoder().decode(this.body.slice(0, ERROR_BODY_SNIPPET)).trim();
    const message = `${this.method} ${this.url} returned ${this.status}: ${snippet}`;
    if ([408, 409, 425, 429].includes(this.status) || (this.status >= 500 && this.status <= 599)) {
      const seconds = Number.parseInt(this.header('retry-after') ?? '', 10);
      throw new RetryAfter(Number.isNaN(seconds) ? DEFAULT_RETRY_SECONDS : Math.min(Math.max(seconds, 1), MAX_RETRY_SECONDS), message);
    }
    const reason = ({ 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound' } as Record<number, string>)[this.status]
      ?? (this.status >= 400 && this.status <= 499 ? 'RequestRejected' : 'UnexpectedHttpStatus');
    throw new Terminal(reason, message);
  }
}

function target(url: string, invalid: (what: string) => Terminal) {
  const at = url.indexOf('://');
  if (at < 0) throw invalid('invalid URL: no scheme');
  const scheme = url.slice(0, at).toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') throw invalid('invalid URL: only http and https are supported');
  const rest = url.slice(at + 3).split('#')[0];
  const cut = rest.search(/[/?]/);
  const authority = cut < 0 ? rest : rest.slice(0, cut);
  const path = cut < 0 ? '' : rest.slice(cut);
  if (authority === '') throw invalid('invalid URL: no host');
  if (authority.includes('@')) throw invalid('invalid URL: user info is not supported; pass credentials in headers');
  if (/[\s\u0000-\u001f]/.test(authority + path)) throw invalid('invalid URL: whitespace or control characters');
  return { https: scheme === 'https', authority, path: path.startsWith('/') ? path : `/${path}` };
}

/** What `request` sends besides the method and URL; `json` replaces `body`. */
export interface RequestParts {
  headers?: [string, string | Uint8Array][];
  body?: Uint8Array;
  json?: unknown;
}

/** Sends a request and reads the whole response, whatever its status. */
export function request(method: string, url: string, { headers = [], body = new Uint8Array(), json }: RequestParts = {}): Response {
  const prefix = `${method} ${url}: `;
  const invalid = (what: string) => new Terminal('InvalidRequest', prefix + what);
  const transport = (what: string) => new RetryAfter(DEFAULT_RETRY_SECONDS, prefix + what);
  const wire = headers.map(([k, v]): Header => [k, typeof v === 'string' ? new TextEncoder().encode(v) : v]);
  if (json !== undefined) {
    body = new TextEncoder().encode(JSON.stringify(json));
    wire.push(['content-type', new TextEncoder().encode('application/json')]);
  }
  if (!wire.some(([k]) => k.toLowerCase() === 'content-length')) {
    wire.push(['content-length', new TextEncoder().encode(String(body.length))]);
  }
  const { https, authority, path } = target(url, invalid);
  let outgoing: OutgoingRequest;
  let outgoingBody: OutgoingBody;
  try {
    outgoing = new OutgoingRequest(Fields.fromList(wire));
    outgoing.setMethod({ tag: method.toLowerCase() } as Method);
    outgoing.setScheme({ tag: https ? 'HTTPS' : 'HTTP' });
    outgoing.setAuthority(authority);
    outgoing.setPathWithQuery(path);
    outgoingBody = outgoing.body();
  } catch (error) {
    throw invalid(`request not accepted (${whatFailed(error)})`);
  }
  const options = new RequestOptions();
  const timeouts: [(nanos: bigint) => void, bigint][] = [
    [(nanos) => options.setConnectTimeout(nanos), 10n],
    [(nanos) => options.setFirstByteTimeout(nanos), 30n],
    [(nanos) => options.setBetweenBytesTimeout(nanos), 30n],
  ];
  for (const [set, seconds] of timeouts) {
    try {
      set(seconds * NANOS);
    } catch {
      // The host keeps its own bound.
    }
  }
  let future;
  try {
    future = handle(outgoing, options);
  } catch (error) {
    throw failureOf(prefix, payloadOf(error) as ErrorCode);
  }
  let written: string | undefined;
  try {
    const stream = outgoingBody.write();
    for (let at = 0; at < body.length; at += WRITE_CHUNK) {
      stream.blockingWriteAndFlush(body.subarray(at, at + WRITE_CHUNK));
    }
    stream[Symbol.dispose]?.();
    OutgoingBody.finish(outgoingBody, undefined);
  } catch (error) {
    written = `writing the request body failed: ${whatFailed(error)}`;
  }
  let result;
  while ((result = future.get()) === undefined) future.subscribe().block();
  if (result.tag === 'err') throw transport('the response was already taken');
  if (result.val.tag === 'err') throw failureOf(prefix, result.val.val);
  if (written !== undefined) throw transport(written);
  const response = result.val.val;
  const status = response.status();
  const responseHeaders = response.headers().entries();
  const incoming = response.consume();
  const stream = incoming.stream();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let chunk;
    try {
      chunk = stream.blockingRead(READ_CHUNK);
    } catch (error) {
      if (payloadOf(error)?.tag === 'closed') break;
      throw transport(`reading the response body failed: ${whatFailed(error)}`);
    }
    size += chunk.length;
    if (size > MAX_RESPONSE_BYTES) throw new Terminal('ResponseTooLarge', `${prefix}response body exceeds ${MAX_RESPONSE_BYTES} bytes`);
    chunks.push(chunk);
  }
  stream[Symbol.dispose]?.();
  IncomingBody.finish(incoming);
  const all = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return new Response(method, url, status, responseHeaders, all);
}

/** An `authorization` header for `token` (bytes). */
export function bearer(token: Uint8Array): Header {
  const prefix = new TextEncoder().encode('Bearer ');
  const value = new Uint8Array(prefix.length + token.length);
  value.set(prefix);
  value.set(token, prefix.length);
  return ['authorization', value];
}
