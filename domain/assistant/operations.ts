/**
 * The catalogue of the service's own API operations, offered to a model as tools (the assistant,
 * and later the connected AI apps). It is read from the OpenAPI document the app serves at
 * /openapi.json, so a tool's name, summary and input are the route's own: the `operationId`, the
 * summary and description, and one input object that holds each path and query parameter as a
 * property and the JSON request body under `body`, every `$ref` inlined.
 *
 * Left out: public operations (health, docs, webhooks), the browser extension's (`x-access:
 * extension`, tagged `pnet-agent`), uploads (a body that is not JSON: multipart, CSV, raw mail) and
 * event streams (an answer that never ends). Pure: the document in, the catalogue out.
 */
import type { Role } from '../shared/common.js';
import { textOf } from '../shared/text.js';

export type JsonSchema = Record<string, unknown>;

export interface CatalogueOperation {
  /** The operationId: the tool's name. */
  name: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The path template, `/tables/{table_id}/rows/`. */
  path: string;
  summary: string;
  description: string;
  tags: string[];
  /** A read needs any key; a write needs a write key (api/plugins/auth.ts). */
  access: 'read' | 'write';
  /**
   * Whether only a workspace admin may call it (`x-admin-only`): true, the condition in words
   * ("when unpausing"), or null for any member. A member is not offered the `true` ones
   * (`offeredTo`); a conditional one is offered and its route refuses the admin-only case.
   */
  admin_only: true | string | null;
  /** Credits one call spends when the route declares a fixed price (`x-price-credits`), else null. */
  price_credits: number | null;
  /** An object schema: the path and query parameters by name, and the JSON body as `body`. */
  input_schema: JsonSchema;
}

/** The parts of an OpenAPI 3.1 document the catalogue reads; anything else is ignored. */
export interface OpenApiDocument {
  paths?: Record<string, Record<string, unknown> | undefined>;
  components?: Record<string, unknown>;
}

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: JsonSchema;
}

const methods = ['get', 'post', 'put', 'patch', 'delete'] as const;
/** Keys whose values are data, not schemas: a `$ref` inside them is left alone. */
const dataKeys = new Set(['enum', 'const', 'default', 'example', 'examples']);
/** The input property that carries the request body. */
export const bodyProperty = 'body';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The value a local reference (`#/components/schemas/Name`) points to. */
function pointee(document: OpenApiDocument, ref: string): unknown {
  if (!ref.startsWith('#/'))
    throw new Error(`The OpenAPI document refers outside itself (${ref}); only local references are read.`);
  let at: unknown = document;
  for (const part of ref.slice(2).split('/')) {
    const key = decodeURIComponent(part).replaceAll('~1', '/').replaceAll('~0', '~');
    if (!isObject(at) || !Object.hasOwn(at, key))
      throw new Error(`The OpenAPI document refers to ${ref}, which it does not define.`);
    at = at[key];
  }
  return at;
}

/**
 * `value` with every `$ref` replaced by a copy of what it points to, its sibling keywords kept.
 * A reference met again inside itself (a tree of folders) becomes an open schema that says so,
 * so the inlined schema stays finite.
 */
function inline(document: OpenApiDocument, value: unknown, open: readonly string[] = []): unknown {
  if (Array.isArray(value)) return value.map((item) => inline(document, item, open));
  if (!isObject(value)) return value;
  if (typeof value.$ref === 'string') {
    const { $ref: ref, ...siblings } = value;
    const name = ref.split('/').at(-1)!;
    const target = open.includes(ref)
      ? { description: `A ${name} again, nested: the same shape as the enclosing ${name}.` }
      : inline(document, pointee(document, ref), [...open, ref]);
    return { ...(isObject(target) ? target : {}), ...(inline(document, siblings, open) as Record<string, unknown>) };
  }
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, dataKeys.has(key) ? item : inline(document, item, open)]),
  );
}

/** The access a route needs: `x-access` when the document says it, else from the method (auth.ts's rule). */
function accessOf(method: string, operation: Record<string, unknown>): string {
  const declared = operation['x-access'];
  if (typeof declared === 'string') return declared;
  // A document without x-access: a public operation accepts no credential (an empty alternative).
  const security = operation.security;
  if (Array.isArray(security) && security.some((s) => isObject(s) && Object.keys(s).length === 0)) return 'public';
  return method === 'get' || method === 'head' ? 'read' : 'write';
}

/** Whether every success answer is an event stream (it never ends, so no tool can wait for it). */
function streamsOnly(operation: Record<string, unknown>): boolean {
  const responses = isObject(operation.responses) ? operation.responses : {};
  const success = Object.entries(responses).filter(([code]) => code.startsWith('2'));
  return (
    success.length > 0 &&
    success.every(([, response]) => {
      const content = isObject(response) && isObject(response.content) ? Object.keys(response.content) : [];
      return content.length > 0 && content.every((type) => type.startsWith('text/event-stream'));
    })
  );
}

/** The one input object of an operation, from its parameters and body (references already inlined). */
function inputSchema(
  name: string,
  parameters: Parameter[],
  body: { schema: JsonSchema; required: boolean } | null,
): JsonSchema {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  const add = (key: string, schema: unknown, isRequired: boolean) => {
    if (Object.hasOwn(properties, key)) throw new Error(`Operation ${name}: two inputs are named ${key}.`);
    properties[key] = schema;
    if (isRequired) required.push(key);
  };
  for (const parameter of parameters) {
    const schema = parameter.schema ?? {};
    const described =
      parameter.description && schema.description === undefined
        ? { ...schema, description: parameter.description }
        : schema;
    add(parameter.name, described, parameter.in === 'path' || parameter.required === true);
  }
  if (body) add(bodyProperty, body.schema, body.required);
  return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
}

/**
 * The operations a model may call, sorted by name. Throws on a document that contradicts itself (a
 * reference to nothing, two inputs of one name), which the app's own document never does.
 */
export function operationCatalogue(document: OpenApiDocument): CatalogueOperation[] {
  const catalogue: CatalogueOperation[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    if (!isObject(item)) continue;
    const shared = Array.isArray(item.parameters) ? item.parameters : [];
    for (const method of methods) {
      const operation = item[method];
      if (!isObject(operation) || typeof operation.operationId !== 'string') continue;
      const name = operation.operationId;
      const tags = Array.isArray(operation.tags)
        ? operation.tags.filter((t): t is string => typeof t === 'string')
        : [];
      const access = accessOf(method, operation);
      if (access !== 'read' && access !== 'write') continue;
      if (tags.includes('pnet-agent') || streamsOnly(operation)) continue;

      const requestBody = operation.requestBody === undefined ? undefined : inline(document, operation.requestBody);
      let body: { schema: JsonSchema; required: boolean } | null = null;
      if (isObject(requestBody)) {
        const content = isObject(requestBody.content) ? requestBody.content : {};
        const json = Object.entries(content).find(
          ([type]) => type === 'application/json' || /^application\/[\w.+-]*\+json$/.test(type),
        );
        if (!json) continue; // an upload: multipart, CSV or a raw file
        body = {
          schema: isObject(json[1]) && isObject(json[1].schema) ? json[1].schema : {},
          required: requestBody.required === true,
        };
      }

      // Path-level parameters, unless the operation redefines one (same name and place).
      const own = (Array.isArray(operation.parameters) ? operation.parameters : []).map((p) => inline(document, p));
      const inherited = shared
        .map((p) => inline(document, p))
        .filter((p) => !own.some((o) => isObject(o) && isObject(p) && o.name === p.name && o.in === p.in));
      const parameters = [...inherited, ...own].filter(
        (p): p is Parameter & Record<string, unknown> =>
          isObject(p) && typeof p.name === 'string' && (p.in === 'path' || p.in === 'query'),
      );

      const price = operation['x-price-credits'];
      const adminOnly = operation['x-admin-only'];
      catalogue.push({
        name,
        method: method.toUpperCase() as CatalogueOperation['method'],
        path,
        summary: typeof operation.summary === 'string' ? operation.summary : '',
        description: typeof operation.description === 'string' ? operation.description : '',
        tags,
        access,
        admin_only: adminOnly === true || typeof adminOnly === 'string' ? adminOnly : null,
        price_credits: typeof price === 'number' && Number.isInteger(price) && price >= 0 ? price : null,
        input_schema: inputSchema(name, parameters, body),
      });
    }
  }
  return catalogue.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The operations a member of `role` may call: an admin every one, a member all but the admin-only ones. */
export function offeredTo(catalogue: CatalogueOperation[], role: Role): CatalogueOperation[] {
  return role === 'admin' ? catalogue : catalogue.filter((op) => op.admin_only !== true);
}

/** The names of a path template's parameters, in order: `/tables/{table_id}/` has `table_id`. */
function pathParameters(path: string): string[] {
  return [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
}

/** A path or query parameter's text (never null or undefined here: those are refused or left out). */
const queryValue = (value: unknown): string => textOf(value);

/**
 * The HTTP request a tool call stands for: the path with its parameters filled in (percent-encoded),
 * the query parameters the operation declares (an array repeats its key; an absent or null value
 * is left out), and the body. It checks nothing else: the route validates the input as it does
 * any request. Throws when a path parameter is missing, since the URL would name another resource.
 */
export function operationRequest(
  op: CatalogueOperation,
  input: Record<string, unknown>,
): { method: CatalogueOperation['method']; url: string; body?: unknown } {
  const fromPath = pathParameters(op.path);
  const missing = fromPath.filter((name) => input[name] === undefined || input[name] === null || input[name] === '');
  if (missing.length)
    throw new Error(
      `Operation ${op.name} needs the path parameter${missing.length > 1 ? 's' : ''} ${missing.join(', ')}.`,
    );
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(queryValue(input[name])));

  const declared = isObject(op.input_schema.properties) ? Object.keys(op.input_schema.properties) : [];
  const query = declared
    .filter((key) => key !== bodyProperty && !fromPath.includes(key))
    .flatMap((key) => {
      const value = input[key];
      const values = Array.isArray(value) ? value : [value];
      return values
        .filter((v) => v !== undefined && v !== null)
        .map((v) => `${encodeURIComponent(key)}=${encodeURIComponent(queryValue(v))}`);
    });
  const url = query.length ? `${path}?${query.join('&')}` : path;
  const hasBody = declared.includes(bodyProperty) && input[bodyProperty] !== undefined;
  return { method: op.method, url, ...(hasBody ? { body: input[bodyProperty] } : {}) };
}
