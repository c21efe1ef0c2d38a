/**
 * The one error handler: every refusal leaves in the shapes of the interface spec's Errors section.
 * ApiError maps through the error table; zod failures and malformed JSON become 422 `issues`; an
 * unreachable Postgres or Temporal becomes 503; anything else is a 500 whose detail says nothing
 * about the internals (the full error goes to the log with the request id).
 */
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { ApiError, ValidationRefusal, failureType, isErrorCode, validationDetail } from '../../domain/shared/errors.js';
import type { ValidationIssue } from '../../domain/shared/common.js';

const locationOf: Record<string, ValidationIssue['loc'][0]> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

function valueAt(root: unknown, path: string[]): unknown {
  let value = root;
  for (const part of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** The offending input: the value itself, or the object it is missing from (never undefined). */
function offendingInput(root: unknown, path: string[]): unknown {
  for (let depth = path.length; depth >= 0; depth -= 1) {
    const value = valueAt(root, path.slice(0, depth));
    if (value !== undefined) return value;
  }
  return {};
}

export function validationBody(issues: ValidationIssue[]) {
  return { detail: validationDetail(issues), issues };
}

function zodIssues(error: FastifyError, request: FastifyRequest): ValidationIssue[] {
  const context = (error as FastifyError & { validationContext?: string }).validationContext ?? 'body';
  const loc = locationOf[context] ?? 'body';
  const source = { body: request.body, query: request.query, path: request.params, header: request.headers }[loc];
  return (error.validation ?? []).map((v) => {
    const path = v.instancePath.split('/').filter(Boolean);
    return {
      loc: path.length > 0 ? [loc, path.join('.')] : [loc],
      msg: v.message ?? 'is invalid',
      type: String(v.keyword),
      input: offendingInput(source, path),
    };
  });
}

const pgUnavailableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  // 08xxx connection exceptions, 57P0x the server is shutting down or starting.
  return pgUnavailableCodes.has(code) || code.startsWith('08') || /^57P0[1-3]$/.test(code);
}

/** Values the schemas let through but Postgres cannot store: a last line of defence, not the rule. */
function isDatabaseInputError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && ['22007', '22008', '22009', '22021', '22P05'].includes(code);
}

function isTemporalUnavailable(error: unknown): boolean {
  const name = (error as { name?: string }).name;
  const grpc = error as { code?: number; cause?: { code?: number } };
  if (name === 'TransportError' || name === 'ConnectionError') return true;
  // gRPC UNAVAILABLE (14) and DEADLINE_EXCEEDED (4) from the Temporal client.
  return name === 'ServiceError' && [4, 14].includes(grpc.cause?.code ?? grpc.code ?? -1);
}

/** A workflow's business refusal (or a use case's TypedFailure): a typed failure whose type is a code of the table. */
function applicationRefusal(error: unknown): ApiError | undefined {
  for (let cause = error as { message?: string; cause?: unknown } | undefined; cause; cause = cause.cause as never) {
    const type = failureType(cause);
    if (isErrorCode(type)) return new ApiError(type, cause.message ?? type);
  }
  return undefined;
}

export function sendError(reply: FastifyReply, error: ApiError) {
  return reply.code(error.status).headers(error.headers).send({ detail: error.detail });
}

export function registerErrorHandling(app: FastifyInstance) {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof ValidationRefusal) return reply.code(422).send(validationBody(error.issues));
    if (error instanceof ApiError) return sendError(reply, error);
    if (hasZodFastifySchemaValidationErrors(error)) {
      return reply.code(422).send(validationBody(zodIssues(error, request)));
    }
    const refusal = applicationRefusal(error);
    if (refusal) return sendError(reply, refusal);
    if (isDatabaseInputError(error)) {
      return reply.code(422).send(
        validationBody([
          {
            loc: ['body'],
            msg: 'A value is outside what can be stored (date range or a NUL character)',
            type: 'value_error',
            input: {},
          },
        ]),
      );
    }
    if (isDatabaseUnavailable(error)) {
      request.log.error({ err: error }, 'database unavailable');
      return sendError(reply, new ApiError('unavailable', 'The database is unavailable. Try again shortly.'));
    }
    if (isTemporalUnavailable(error)) {
      request.log.error({ err: error }, 'temporal unavailable');
      return sendError(reply, new ApiError('unavailable', 'The workflow service is unavailable. Try again shortly.'));
    }
    // Fastify's own 4xx: malformed JSON or an empty JSON body is unprocessable input.
    if (
      error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
      error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
      error instanceof SyntaxError
    ) {
      return reply
        .code(422)
        .send(validationBody([{ loc: ['body'], msg: 'The body is not valid JSON', type: 'json_invalid', input: '' }]));
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500 && !isResponseSerializationError(error)) {
      return reply.code(status).send({ detail: error.message.replace(/^FST_\w+: /, '') });
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send({ detail: 'Internal server error. The request id is ' + request.id + '.' });
  });
}

/**
 * A request Node's HTTP parser refuses before any route sees it (a header it cannot parse, such as
 * a Content-Length that is not a number): answered in the shape of the interface spec's Errors
 * section, as every other refusal, and the connection closed, since what follows on it cannot be
 * trusted. Fastify's `clientErrorHandler`.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, reason, detail] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', 'The request did not arrive in time.']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'The request headers are larger than 64 KiB.']
        : [
            400,
            'Bad Request',
            'The HTTP request is malformed (a header the HTTP parser refuses, such as a Content-Length that is not a number).',
          ];
  const body = JSON.stringify({ detail });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
