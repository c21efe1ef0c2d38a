import type { ValidationIssue } from './common.js';

/**
 * The one error table. Routes, activities and workflows refuse with a code from this list; the API
 * maps it to a status and a `detail` body (the interface spec's Errors). Workflow business refusals
 * carry the code as their ApplicationFailure type, so the same table maps them too.
 */
export const errorStatus = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  insufficient_credits: 409,
  rate_limited: 429,
  internal: 500,
  bad_gateway: 502,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorStatus, value);
}

export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.status = errorStatus[code];
  }
}

/** A 422's one-line detail: the first issue, and how many more there are. */
export function validationDetail(issues: ValidationIssue[]): string {
  const first = issues[0]!;
  const where = first.loc.length > 1 ? `${first.loc[0]} field "${first.loc[1]}"` : `request ${first.loc[0]}`;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  return `Invalid ${where}: ${first.msg}${more}`.replace(/\s+/g, ' ');
}

/**
 * A refusal of values only the service can judge (a sequence graph, an agent's inputs, a
 * do-not-contact value), answered like a schema failure: 422 with `issues`. The store and the
 * routes throw it; the API's error handler writes the body, so every 422 has the one shape.
 */
export class ValidationRefusal extends ApiError {
  constructor(readonly issues: ValidationIssue[]) {
    super('unprocessable', validationDetail(issues));
  }
}

/** One value refused as a `value_error` at `loc` (422 with that one issue). */
export const valueRefusal = (loc: string[], msg: string, input: unknown) =>
  new ValidationRefusal([{ loc, msg, type: 'value_error', input }]);

export const notFound = (what: string) => new ApiError('not_found', `${what} not found.`);

/**
 * A use case's failure typed for the workflow that runs it: `type` is what the workflow's retry
 * policy matches (nonRetryableErrorTypes; a code of this table maps in the API too), `retryable`
 * whether another attempt may help. Services throw it and import nothing of Temporal; the activity
 * doors turn it into the ApplicationFailure of the same type (activities/shared/failures.ts).
 */
export class TypedFailure extends Error {
  override name = 'TypedFailure';
  constructor(
    message: string,
    readonly type: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** This will never succeed: no retry, whatever the workflow's policy. */
export const nonRetryable = (message: string, type: string) => new TypedFailure(message, type, false);

/** Another attempt may succeed: the workflow's retry policy decides. */
export const retryable = (message: string, type: string) => new TypedFailure(message, type, true);

/**
 * The type of a typed failure: a TypedFailure's, or an ApplicationFailure's (store/pnet/steps.ts
 * still refuses with those), the latter read by name so no layer needs Temporal to ask.
 */
export function failureType(error: unknown): string | undefined {
  if (error instanceof TypedFailure) return error.type;
  const named = error as { name?: unknown; type?: unknown } | null;
  return named?.name === 'ApplicationFailure' && typeof named.type === 'string' ? named.type : undefined;
}

/** Missing or invalid credentials: one answer whatever was wrong (auth, and a statement that checks a connection token itself). */
export const unauthenticated = () =>
  new ApiError(
    'unauthorized',
    'Missing or invalid credentials: send a valid X-API-Key header or Authorization: Bearer token.',
  );
