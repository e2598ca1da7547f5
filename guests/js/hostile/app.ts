// A JavaScript bootstrap provider that misbehaves on purpose, as its config
// says: {"do": "loop"} computes for ever, `allocate` grows without bound,
// `raise` throws an Error. (It has no environment check: the engine has no
// API for one.) The JS provider tests check that each is contained with the
// right typed error.

import type * as World from 'capwasm:provider/bootstrap-provider@0.1.2';

import { providerCall } from '../sdk/exports.ts';

const SCHEMA = JSON.stringify({
  type: 'object',
  additionalProperties: false,
  required: ['do'],
  properties: { do: { enum: ['loop', 'allocate', 'raise'] } },
});

export const info: typeof World.info = () => ({ name: 'hostile-js', version: '0.1.0' });

export const configSchema: typeof World.configSchema = () => SCHEMA;

export const bootstrap: typeof World.bootstrap = {
  generate: providerCall((request) => {
    const what: unknown = JSON.parse(request.config).do;
    if (what === 'loop') {
      for (let n = 0; ; n += 1);
    }
    if (what === 'allocate') {
      const hoard = [];
      for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
    }
    throw new Error('the hostile provider raised, as asked');
  }),
};
