/**
 * What a workspace admin may do that a member may not. Most admin-only operations say so in their
 * route config (`config.role: 'admin'`), and api/plugins/auth.ts refuses a member before the
 * handler runs. The two whose answer depends on the request (unpausing in `updateAgentSending`,
 * another member's app in `revokeConnectedApp`) decide in their handler with `requireAdmin`, so
 * every refusal reads the same; their routes say the condition in `config.adminOnly`, and
 * `x-admin-only` in the OpenAPI document lists them all (see docs/api.md, Authentication).
 */
import type { Role } from '../shared/common.js';
import { ApiError } from '../shared/errors.js';

/** The 403 detail of every admin-only refusal; auth.ts's hook answers the same words. */
export const adminOnlyDetail = 'Only a workspace admin may do this.';

/** Refuses (403) a caller who is not a workspace admin. */
export function requireAdmin(principal: { role: Role }, detail?: string): void {
  if (principal.role !== 'admin') throw new ApiError('forbidden', detail ?? adminOnlyDetail);
}
