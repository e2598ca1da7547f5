// A JavaScript bootstrap provider that misbehaves on purpose, as its config
// says: {"do": "loop"} computes for ever, `allocate` grows without bound,
// `environment` returns what it finds of its environment, `raise` throws
// an Error. The JS provider tests check that each is contained with the
// right typed error.

import type * as World from 'capwasm:provider/bootstrap-provider@0.1.0';
import type { BootstrapData } from 'capwasm:provider/types@0.1.0';

import { providerCall } from '../sdk/exports.ts';

const SCHEMA = JSON.stringify({
  type: 'object',
  additionalProperties: false,
  required: ['do'],
  properties: { do: { enum: ['loop', 'allocate', 'environment', 'raise'] } },
});

export const info: typeof World.info = () => ({ name: 'hostile-js', version: '0.1.0' });

export const configSchema: typeof World.configSchema = () => SCHEMA;

function data(text: string): BootstrapData {
  const script = `#!/bin/sh\n: '${text.replaceAll("'", '')}'\n`;
  return { format: 'shell-script', value: new TextEncoder().encode(script) };
}

// StarlingMonkey has no `process`; should a runtime bring one, its
// environment is what the host gave the component.
const environment = () => (globalThis as { process?: { env?: object } }).process?.env ?? {};

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
    if (what === 'environment') return data(JSON.stringify(environment()));
    throw new Error('the hostile provider raised, as asked');
  }),
};
