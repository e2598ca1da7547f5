// The kubeadm bootstrap provider in TypeScript: the same config schema and
// the same cloud-config as the Rust `kubeadm-bootstrap`, on componentize-js.

import type * as World from 'capwasm:provider/bootstrap-provider@0.1.2';
import { joinToken } from 'capwasm:provider/bootstrap-tokens@0.1.2';

import { providerCall } from '../sdk/exports.ts';
import { log } from '../sdk/log.ts';
import { parse, render, withToken } from './kubeadm.ts';
import SCHEMA from './schema.json';

/** `id.secret` of the token the host made for this call, if any. */
function hostToken(): string | undefined {
  const token = joinToken();
  return token === undefined ? undefined : `${token.id}.${token.secret}`;
}

export const info: typeof World.info = () => ({ name: 'kubeadm-bootstrap-js', version: '0.1.0' });

export const configSchema: typeof World.configSchema = () => SCHEMA;

export const bootstrap: typeof World.bootstrap = {
  generate: providerCall((request) => {
    const config = withToken(parse(request.config), hostToken);
    const cloudConfig = render(config, request.cluster);
    log.info('rendered kubeadm cloud-config', { mode: config.mode, owner: request.ownerName });
    return { format: 'cloud-config', value: new TextEncoder().encode(cloudConfig) };
  }),
};
