/**
 * The door the assistant's tool cards go through: the service's own operations (the catalogue read
 * from this app's OpenAPI document) called in-process with app.inject, as the member the card acts
 * for. The member's own access applies (role, plan), exactly as if they had made the request; the
 * credential is this process's acting secret (api/plugins/auth.ts), which never leaves it.
 */
import type { FastifyInstance } from 'fastify';
import { operationCatalogue, type CatalogueOperation, type OpenApiDocument } from '../domain/assistant/operations.js';
import type { OperationDoor } from '../domain/assistant/tool-cards.js';
import { actingHeader } from './plugins/auth.js';

export function operationDoor(app: FastifyInstance, actingSecret: string): OperationDoor {
  let catalogue: CatalogueOperation[] | undefined;
  return {
    catalogue: () => (catalogue ??= operationCatalogue(app.swagger() as OpenApiDocument)),
    async call(memberId, request) {
      const res = await app.inject({
        method: request.method as 'GET',
        url: request.url,
        headers: {
          [actingHeader]: `${actingSecret}:${memberId}`,
          ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(request.body !== undefined ? { payload: JSON.stringify(request.body) } : {}),
      });
      let body: unknown = res.body;
      try {
        body = res.body ? (JSON.parse(res.body) as unknown) : null;
      } catch {
        // Not JSON (a CSV export): the text as it is.
      }
      return { status: res.statusCode, body };
    },
  };
}
