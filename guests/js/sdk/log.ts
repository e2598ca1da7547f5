// Structured logging into the host's log (capwasm:provider/log), which
// both worlds import.

import { log as hostLog, type Level } from 'capwasm:provider/log@0.1.2';

/** Field values are written with `String()`. */
export type Fields = Record<string, unknown>;

const at = (level: Level) => (message: string, fields: Fields = {}) =>
  hostLog(level, message, Object.entries(fields).map(([k, v]): [string, string] => [k, String(v)]));

export const log = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
