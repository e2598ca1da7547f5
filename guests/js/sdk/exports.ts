// Glue between a provider's functions and its WIT exports.

import { log } from 'capwasm:provider/log@0.1.2';

import { ProviderFailure } from './capwasm-provider.ts';

/**
 * Wraps an export returning `result<_, provider-error>`: a thrown
 * ProviderFailure becomes the call's error. Anything else traps the call,
 * after handing the host what was thrown, which it reports with the trap
 * (`guest said: Error: ...`).
 */
export function providerCall<A extends unknown[], R>(method: (...args: A) => R): (...args: A) => R {
  return (...args) => {
    try {
      return method(...args);
    } catch (error) {
      if (error instanceof ProviderFailure) throw error.toWit();
      // The log line the WIT reserves for a guest's last words. One line:
      // the host escapes line breaks in it, and the stack's lines would
      // point into the bundle rather than the sources.
      log('error', String(error), [['', '']]);
      throw error;
    }
  };
}
