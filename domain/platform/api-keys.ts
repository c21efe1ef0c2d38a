/** API keys (the interface spec's API keys). */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema, type Plan } from '../shared/common.js';

export const ScopeSchema = z.enum(['read', 'write']).meta({ id: 'Scope' });
export type Scope = z.infer<typeof ScopeSchema>;

/** An expiry Postgres and every client can store: years 1970 to 9998, said in the schema itself. */
const ExpireAtSchema = TimestampSchema.regex(
  /^(19[7-9]\d|[2-8]\d{3}|9[0-8]\d{2}|99[0-8]\d|999[0-8])-/,
  'must be a date between 1970 and 9998',
);

export const ApiKeyCreateSchema = z
  .object({
    name: NameSchema,
    expire_at: ExpireAtSchema.nullable().optional(),
    scope: ScopeSchema.nullable().optional(),
  })
  .meta({ id: 'ApiKeyCreate' });
export type ApiKeyCreate = z.infer<typeof ApiKeyCreateSchema>;

export const ApiKeyUpdateSchema = z
  .object({ name: NameSchema.optional(), expire_at: ExpireAtSchema.nullable().optional() })
  .meta({ id: 'ApiKeyUpdate' });
export type ApiKeyUpdate = z.infer<typeof ApiKeyUpdateSchema>;

export const ApiKeySchema = z
  .object({
    id: UuidSchema,
    org_id: z.string(),
    name: z.string(),
    scope: ScopeSchema,
    key_prefix: z.string(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
    expire_at: TimestampSchema.nullable(),
    last_used_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'ApiKey' });
export type ApiKey = z.infer<typeof ApiKeySchema>;

export const ApiKeyCreatedSchema = ApiKeySchema.extend({
  key: z.string().describe('The secret. Returned only in this response; only its hash is stored.'),
}).meta({ id: 'ApiKeyCreated' });

export const ApiKeyListSchema = z.object({ api_keys: z.array(ApiKeySchema) }).meta({ id: 'ApiKeyList' });
export const ApiKeyCountSchema = z.object({ count: z.int() }).meta({ id: 'ApiKeyCount' });
export const ApiKeyScopesSchema = z.object({ scopes: z.array(ScopeSchema) }).meta({ id: 'ApiKeyScopes' });

/** Free workspaces mint read keys only; the default is the most the plan allows. */
export function scopesForPlan(plan: Plan): Scope[] {
  return plan === 'paid' ? ['read', 'write'] : ['read'];
}

/** What a key may do now: the plan decides (a write key of a workspace gone free reads only until it pays again). */
export function keyScopeOnPlan(scope: Scope, plan: Plan): Scope {
  return plan === 'paid' ? scope : 'read';
}

export function defaultScope(plan: Plan): Scope {
  return plan === 'paid' ? 'write' : 'read';
}
