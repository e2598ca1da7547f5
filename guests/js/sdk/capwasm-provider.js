// capwasm's provider SDK for JavaScript (componentize-js): the failures a
// call throws, turned into the WIT `provider-error`; strict parsing of
// `spec.config` with JSON paths; logging; and blocking HTTP over the
// `wasi:http` imports, with the Rust SDK's timeouts and error mapping.
// A provider imports it and is bundled with it into one module.

import { log as wasiLog } from 'capwasm:provider/log@0.1.0';
import { handle } from 'wasi:http/outgoing-handler@0.2.12';
import {
  Fields,
  OutgoingRequest,
  OutgoingBody,
  IncomingBody,
  RequestOptions,
} from 'wasi:http/types@0.2.12';

// === failures ===

/** Base of the failures the host turns into a condition, an Event and a requeue. */
export class ProviderFailure extends Error {}

/** Transient: the host calls again after `seconds`. */
export class RetryAfter extends ProviderFailure {
  constructor(seconds, message) {
    super(message);
    this.seconds = seconds;
  }
  toWit() {
    return { tag: 'retry-after', val: { seconds: this.seconds, message: this.message } };
  }
}

/** Calling again will not help without a change; `reason` is CamelCase. */
export class Terminal extends ProviderFailure {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
  toWit() {
    return { tag: 'terminal', val: { reason: this.reason, message: this.message } };
  }
}

/** The object's `spec.config` is not acceptable, at JSON `path`. */
export class InvalidConfig extends ProviderFailure {
  constructor(path, message) {
    super(message);
    this.path = String(path);
  }
  toWit() {
    return { tag: 'invalid-config', val: { path: this.path, message: this.message } };
  }
}

/**
 * Wraps an export returning `result<_, provider-error>`: a thrown
 * ProviderFailure becomes the call's error; anything else traps the call.
 */
export function providerCall(method) {
  return (...args) => {
    try {
      return method(...args);
    } catch (error) {
      if (error instanceof ProviderFailure) throw error.toWit();
      throw error;
    }
  };
}

// === config ===

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A JSON path: `$`, `$.token`, `$.labels['node.example/role']`. */
export class JsonPath {
  constructor(text = '$') {
    this.text = text;
  }
  key(key) {
    if (PLAIN_KEY.test(key)) return new JsonPath(`${this.text}.${key}`);
    return new JsonPath(`${this.text}['${key.replace(/[\\']/g, (c) => `\\${c}`)}']`);
  }
  index(i) {
    return new JsonPath(`${this.text}[${i}]`);
  }
  toString() {
    return this.text;
  }
}

export const ROOT = new JsonPath();

function kind(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'sequence';
  if (typeof value === 'object') return 'map';
  return typeof value;
}

export function string(value, path) {
  if (typeof value !== 'string') throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected a string`);
  return value;
}

export function strings(value, path) {
  if (!Array.isArray(value)) throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected a sequence`);
  return value.map((item, i) => string(item, path.index(i)));
}

/** An object of strings, its keys sorted. */
export function stringMap(value, path) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected a map`);
  }
  const checked = Object.entries(value).map(([k, v]) => [k, string(v, path.key(k))]);
  checked.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(checked);
}

/** An integer from `min` to `max`. */
export function integer(min, max) {
  return (value, path) => {
    if (!Number.isInteger(value)) throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected an integer`);
    if (value < min || value > max) throw new InvalidConfig(path, `invalid value: integer \`${value}\`, expected ${min} to ${max}`);
    return value;
  };
}

/** `read`, or null for null. */
export function nullable(read) {
  return (value, path) => (value === null ? null : read(value, path));
}

/**
 * Parses `text` as a JSON object with exactly these fields: `required` and
 * `optional` map each JSON name to a reader `(value, path) => parsed`.
 */
export function parseObject(text, required, optional) {
  let document;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new InvalidConfig(ROOT, `not JSON: ${error.message}`);
  }
  if (document === null || typeof document !== 'object' || Array.isArray(document)) {
    throw new InvalidConfig(ROOT, `invalid type: ${kind(document)}, expected a config object`);
  }
  const parsed = {};
  for (const [name, value] of Object.entries(document)) {
    const read = required[name] ?? optional[name];
    if (read === undefined) throw new InvalidConfig(ROOT.key(name), `unknown field \`${name}\``);
    parsed[name] = read(value, ROOT.key(name));
  }
  for (const name of Object.keys(required)) {
    if (!(name in parsed)) throw new InvalidConfig(ROOT, `missing field \`${name}\``);
  }
  return parsed;
}

// === log ===

function logAt(level, message, fields) {
  wasiLog(level, message, Object.entries(fields).map(([k, v]) => [k, String(v)]));
}

export const log = {
  debug: (message, fields = {}) => logAt('debug', message, fields),
  info: (message, fields = {}) => logAt('info', message, fields),
  warn: (message, fields = {}) => logAt('warn', message, fields),
  error: (message, fields = {}) => logAt('error', message, fields),
};

// === HTTP ===

export const DEFAULT_RETRY_SECONDS = 15;
const MAX_RETRY_SECONDS = 3600;
const MAX_RESPONSE_BYTES = 16 << 20;
const NANOS = 1_000_000_000n;
const WRITE_CHUNK = 4096;
const READ_CHUNK = 65536n;
const ERROR_BODY_SNIPPET = 512;
const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** `value` percent-encoded for a path segment or a query value. */
export function encodeComponent(value) {
  let out = '';
  for (const byte of new TextEncoder().encode(value)) {
    const c = String.fromCharCode(byte);
    out += byte < 0x80 && UNRESERVED.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** An http(s) URL with a host, no user info, query or fragment. */
export function isBaseUrl(url) {
  for (const scheme of ['http://', 'https://']) {
    if (url.startsWith(scheme)) {
      const host = url.slice(scheme.length).split('/')[0];
      return host !== '' && !host.includes('@') && !/[?#]/.test(url) && !/[\s\u0000-\u001f\u007f-\u009f]/.test(url);
    }
  }
  return false;
}

const DESCRIPTIONS = {
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
const DENIED = new Set(['HTTP-request-denied', 'destination-IP-prohibited']);
const INVALID = new Set([
  'HTTP-request-method-invalid', 'HTTP-request-URI-invalid', 'HTTP-request-URI-too-long',
  'HTTP-request-header-section-size', 'HTTP-request-header-size', 'HTTP-request-body-size',
  'HTTP-request-length-required', 'configuration-error',
]);

function failureOf(prefix, code) {
  const what = prefix + (DESCRIPTIONS[code.tag] ?? code.tag);
  if (DENIED.has(code.tag)) return new Terminal('HttpRequestDenied', what);
  if (INVALID.has(code.tag)) return new Terminal('InvalidRequest', what);
  if (code.tag === 'HTTP-response-body-size') return new Terminal('ResponseTooLarge', what);
  return new RetryAfter(DEFAULT_RETRY_SECONDS, what);
}

/** A whole response: `status`, `headers` ([name, bytes]) and `body` (bytes). */
export class Response {
  constructor(method, url, status, headers, body) {
    Object.assign(this, { method, url, status, headers, body });
  }
  header(name) {
    const found = this.headers.find(([k]) => k.toLowerCase() === name.toLowerCase());
    return found ? new TextDecoder().decode(found[1]) : undefined;
  }
  json() {
    try {
      return JSON.parse(new TextDecoder().decode(this.body));
    } catch (error) {
      throw new Terminal('InvalidResponse', `${this.method} ${this.url} returned a body that does not decode: ${error.message}`);
    }
  }
  errorForStatus() {
    if (this.status >= 200 && this.status < 300) return this;
    const snippet = new TextDecoder().decode(this.body.slice(0, ERROR_BODY_SNIPPET)).trim();
    const message = `${this.method} ${this.url} returned ${this.status}: ${snippet}`;
    if ([408, 409, 425, 429].includes(this.status) || (this.status >= 500 && this.status <= 599)) {
      const seconds = Number.parseInt(this.header('retry-after') ?? '', 10);
      throw new RetryAfter(Number.isNaN(seconds) ? DEFAULT_RETRY_SECONDS : Math.min(Math.max(seconds, 1), MAX_RETRY_SECONDS), message);
    }
    const reason = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound' }[this.status]
      ?? (this.status >= 400 && this.status <= 499 ? 'RequestRejected' : 'UnexpectedHttpStatus');
    throw new Terminal(reason, message);
  }
}

function target(url, invalid) {
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

/** Sends a request and reads the whole response, whatever its status. */
export function request(method, url, { headers = [], body = new Uint8Array(), json } = {}) {
  const prefix = `${method} ${url}: `;
  const invalid = (what) => new Terminal('InvalidRequest', prefix + what);
  const transport = (what) => new RetryAfter(DEFAULT_RETRY_SECONDS, prefix + what);
  let wire = headers.map(([k, v]) => [k, typeof v === 'string' ? new TextEncoder().encode(v) : v]);
  if (json !== undefined) {
    body = new TextEncoder().encode(JSON.stringify(json));
    wire.push(['content-type', new TextEncoder().encode('application/json')]);
  }
  if (!wire.some(([k]) => k.toLowerCase() === 'content-length')) {
    wire.push(['content-length', new TextEncoder().encode(String(body.length))]);
  }
  const { https, authority, path } = target(url, invalid);
  let outgoing;
  let outgoingBody;
  try {
    outgoing = new OutgoingRequest(Fields.fromList(wire));
    outgoing.setMethod({ tag: method.toLowerCase() });
    outgoing.setScheme({ tag: https ? 'HTTPS' : 'HTTP' });
    outgoing.setAuthority(authority);
    outgoing.setPathWithQuery(path);
    outgoingBody = outgoing.body();
  } catch (error) {
    throw invalid(`request not accepted (${error?.payload?.tag ?? error})`);
  }
  const options = new RequestOptions();
  for (const set of ['setConnectTimeout', 'setFirstByteTimeout', 'setBetweenBytesTimeout']) {
    try {
      options[set]((set === 'setConnectTimeout' ? 10n : 30n) * NANOS);
    } catch {
      // The host keeps its own bound.
    }
  }
  let future;
  try {
    future = handle(outgoing, options);
  } catch (error) {
    throw failureOf(prefix, error.payload);
  }
  let written;
  try {
    const stream = outgoingBody.write();
    for (let at = 0; at < body.length; at += WRITE_CHUNK) {
      stream.blockingWriteAndFlush(body.subarray(at, at + WRITE_CHUNK));
    }
    stream[Symbol.dispose]?.();
    OutgoingBody.finish(outgoingBody, undefined);
  } catch (error) {
    written = `writing the request body failed: ${error?.payload?.tag ?? error}`;
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
  const chunks = [];
  let size = 0;
  for (;;) {
    let chunk;
    try {
      chunk = stream.blockingRead(READ_CHUNK);
    } catch (error) {
      if (error?.payload?.tag === 'closed') break;
      throw transport(`reading the response body failed: ${error?.payload?.tag ?? error}`);
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
export function bearer(token) {
  const prefix = new TextEncoder().encode('Bearer ');
  const value = new Uint8Array(prefix.length + token.length);
  value.set(prefix);
  value.set(token, prefix.length);
  return ['authorization', value];
}
