/**
 * The one place a use case's failure becomes what Temporal records: a TypedFailure
 * (domain/shared/errors.ts) leaves an activity as the ApplicationFailure of its type, message and
 * retryability, which the workflows' retry policies (nonRetryableErrorTypes) and the API's error
 * handler read; anything else leaves as thrown, for Temporal to convert as it always has.
 */
import { ApplicationFailure } from '@temporalio/common';
import { TypedFailure } from '../../domain/shared/errors.js';

export function activityFailure(error: unknown): unknown {
  if (!(error instanceof TypedFailure)) return error;
  const failure = error.retryable
    ? ApplicationFailure.retryable(error.message, error.type)
    : ApplicationFailure.nonRetryable(error.message, error.type);
  // The frames of the use case that failed, not of this door.
  if (error.stack) failure.stack = error.stack.replace(/^TypedFailure/, 'ApplicationFailure');
  return failure;
}

/** `activities` with each one's failures leaving through activityFailure. */
export function withActivityFailures<T extends object>(activities: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, activity] of Object.entries(activities)) {
    wrapped[name] =
      typeof activity === 'function'
        ? async (...args: unknown[]) => {
            try {
              return await (activity as (...a: unknown[]) => Promise<unknown>)(...args);
            } catch (error) {
              throw activityFailure(error);
            }
          }
        : activity;
  }
  return wrapped as T;
}
