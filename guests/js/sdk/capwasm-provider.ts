// capwasm's provider SDK for JavaScript and TypeScript (componentize-js):
// the failures a call throws, as the WIT `provider-error`, and strict
// parsing of `spec.config` with JSON paths. It calls nothing in the host,
// so unit tests run it under Node; what does is in `exports.ts`
// (`providerCall`), `log.ts` and `http.ts` (the infrastructure world only).
// A provider is bundled with the modules it imports into one.

import type { ProviderError } from 'capwasm:provider/types@0.1.2';

// === failures ===

/** Base of the failures the host turns into a condition, an Event and a requeue. */
export abstract class ProviderFailure extends Error {
  abstract toWit(): ProviderError;
}

/** Transient: the host calls again after `seconds`. */
export class RetryAfter extends ProviderFailure {
  readonly seconds: number;
  constructor(seconds: number, message: string) {
    super(message);
    this.seconds = seconds;
  }
  toWit(): ProviderError {
    return { tag: 'retry-after', val: { seconds: this.seconds, message: this.message } };
  }
}

/** Calling again will not help without a change; `reason` is CamelCase. */
export class Terminal extends ProviderFailure {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
  toWit(): ProviderError {
    return { tag: 'terminal', val: { reason: this.reason, message: this.message } };
  }
}

/** The object's `spec.config` is not acceptable, at JSON `path`. */
export class InvalidConfig extends ProviderFailure {
  readonly path: string;
  constructor(path: JsonPath | string, message: string) {
    super(message);
    this.path = String(path);
  }
  toWit(): ProviderError {
    return { tag: 'invalid-config', val: { path: this.path, message: this.message } };
  }
}

// === config ===

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A JSON path: `$`, `$.token`, `$.labels['node.example/role']`. */
export class JsonPath {
  private readonly text: string;
  constructor(text = '$') {
    this.text = text;
  }
  key(key: string): JsonPath {
    if (PLAIN_KEY.test(key)) return new JsonPath(`${this.text}.${key}`);
    return new JsonPath(`${this.text}['${key.replace(/[\\']/g, (c) => `\\${c}`)}']`);
  }
  index(i: number): JsonPath {
    return new JsonPath(`${this.text}[${i}]`);
  }
  toString(): string {
    return this.text;
  }
}

export const ROOT = new JsonPath();

/** Reads one config value found at `path`, or throws InvalidConfig. */
export type Reader<T> = (value: unknown, path: JsonPath) => T;

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'sequence';
  if (typeof value === 'object') return 'map';
  return typeof value;
}

/**
 * Orders strings by code point, as Rust's `str` and `BTreeMap` do (`<`
 * compares UTF-16 units, which puts astral characters before U+E000).
 */
export function byCodePoint(a: string, b: string): number {
  for (let i = 0; i < a.length && i < b.length; i += 1) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return unitRank(x) - unitRank(y);
  }
  return a.length - b.length;
}

// Surrogates (astral code points) after U+E000-U+FFFF, the rest in order.
const unitRank = (unit: number) => (unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit);

export function string(value: unknown, path: JsonPath): string {
  if (typeof value !== 'string') throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected a string`);
  return value;
}

export function strings(value: unknown, path: JsonPath): string[] {
  if (!Array.isArray(value)) throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected a sequence`);
  return value.map((item, i) => string(item, path.index(i)));
}

/**
 * An object of strings, as a Map in code point order of its keys (a plain
 * object would put integer-like keys first).
 */
export function stringMap(value: unknown, path: JsonPath): Map<string, string> {
  if (!isObject(value)) throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected a map`);
  const checked = Object.entries(value).map(([k, v]): [string, string] => [k, string(v, path.key(k))]);
  return new Map(checked.sort(([a], [b]) => byCodePoint(a, b)));
}

/** An integer from `min` to `max`. */
export function integer(min: number, max: number): Reader<number> {
  return (value, path) => {
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      throw new InvalidConfig(path, `invalid type: ${kind(value)}, expected an integer`);
    }
    if (value < min || value > max) throw new InvalidConfig(path, `invalid value: integer \`${value}\`, expected ${min} to ${max}`);
    return value;
  };
}

/** One of `choices`, in serde's words for an enum when it is not. */
export function oneOf<const C extends string>(...choices: C[]): Reader<C> {
  return (value, path) => {
    const text = string(value, path);
    if ((choices as string[]).includes(text)) return text as C;
    const names = choices.map((c) => `\`${c}\``);
    const expected = names.length <= 2 ? names.join(' or ') : `one of ${names.join(', ')}`;
    throw new InvalidConfig(path, `unknown variant \`${text}\`, expected ${expected}`);
  };
}

/** `read`, or null for null. */
export function nullable<T>(read: Reader<T>): Reader<T | null> {
  return (value, path) => (value === null ? null : read(value, path));
}

type Readers = Record<string, Reader<unknown>>;
/** What parseObject returns: each field read, the optional ones when present. */
type Parsed<R extends Readers, O extends Readers> = { [K in keyof R]: ReturnType<R[K]> } & {
  [K in keyof O]?: ReturnType<O[K]>;
};

/**
 * Parses `text` as a JSON object with exactly these fields: `required` and
 * `optional` map each JSON name to a reader `(value, path) => parsed`.
 */
export function parseObject<R extends Readers, O extends Readers>(text: string, required: R, optional: O): Parsed<R, O> {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new InvalidConfig(ROOT, `not JSON: ${(error as Error).message}`);
  }
  if (!isObject(document)) throw new InvalidConfig(ROOT, `invalid type: ${kind(document)}, expected a config object`);
  // Own properties only: `constructor` or `__proto__` is no field.
  const reader = (name: string) =>
    Object.hasOwn(required, name) ? required[name] : Object.hasOwn(optional, name) ? optional[name] : undefined;
  const parsed = new Map<string, unknown>();
  for (const [name, value] of Object.entries(document)) {
    const read = reader(name);
    if (read === undefined) throw new InvalidConfig(ROOT.key(name), `unknown field \`${name}\``);
    parsed.set(name, read(value, ROOT.key(name)));
  }
  for (const name of Object.keys(required)) {
    if (!parsed.has(name)) throw new InvalidConfig(ROOT, `missing field \`${name}\``);
  }
  return Object.fromEntries(parsed) as Parsed<R, O>;
}
