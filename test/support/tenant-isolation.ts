/**
 * The tenant-isolation check every feature gets for free: for every operation in the OpenAPI
 * document whose path has an id, call it with ANOTHER workspace's credential and the owner's ids,
 * and expect 404 with a detail body and no change for the owner. A path parameter with no id
 * supplied fails the check, so a new route cannot slip past it.
 */
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';

interface Operation {
  method: string;
  path: string;
  operationId: string;
  tags: string[];
}

/** Operations the browser extension calls with its connection token rather than a key. */
const extensionTag = 'pnet-agent';

export async function operationsWithIds(app: FastifyInstance): Promise<Operation[]> {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{
    paths: Record<
      string,
      Record<
        string,
        { operationId: string; tags?: string[]; parameters?: { in: string; schema?: { format?: string } }[] }
      >
    >;
  }>();
  // An id is a uuid path parameter; an enum in the path (a tool's key) names no workspace's resource.
  const hasId = (op: { parameters?: { in: string; schema?: { format?: string } }[] }) =>
    (op.parameters ?? []).some((p) => p.in === 'path' && p.schema?.format === 'uuid');
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([, op]) => hasId(op))
      .map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        tags: op.tags ?? [],
      })),
  );
}

export async function expectTenantIsolation(options: {
  app: FastifyInstance;
  /** Headers of a write-capable admin of the other workspace. */
  intruderHeaders: Record<string, string>;
  /** Headers of a browser extension of the other workspace (its connection token). */
  intruderExtensionHeaders: Record<string, string>;
  /** Ids of the owner's resources, by path parameter name. */
  ids: Record<string, string>;
  /** A valid body per operationId, for operations that validate one before looking the id up. */
  bodies?: Record<string, unknown>;
}): Promise<Operation[]> {
  const operations = await operationsWithIds(options.app);
  for (const op of operations) {
    const url = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const id = options.ids[name];
      if (!id)
        throw new Error(
          `No id supplied for path parameter "${name}" of ${op.method} ${op.path}: add one to the isolation test.`,
        );
      return id;
    });
    const res = await options.app.inject({
      method: op.method as 'GET',
      url,
      headers: op.tags.includes(extensionTag) ? options.intruderExtensionHeaders : options.intruderHeaders,
      ...(['POST', 'PUT', 'PATCH'].includes(op.method) ? { payload: options.bodies?.[op.operationId] ?? {} } : {}),
    });
    expect({ op: `${op.method} ${op.path}`, status: res.statusCode }).toEqual({
      op: `${op.method} ${op.path}`,
      status: 404,
    });
    expect(Object.keys(res.json())).toEqual(['detail']);
  }
  return operations;
}
