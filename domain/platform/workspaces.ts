import { z } from 'zod';
import { PlanSchema, RoleSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

export const WorkspaceSchema = z
  .object({ id: UuidSchema, name: z.string(), plan: PlanSchema, created_at: TimestampSchema })
  .meta({ id: 'Workspace' });

export const MemberSchema = z
  .object({
    id: UuidSchema,
    user_id: z.string().describe('The identity-provider user id (the bearer token `sub`)'),
    display_name: z.string(),
    email: z.string(),
    role: RoleSchema,
    created_at: TimestampSchema,
  })
  .meta({ id: 'Member' });
export type Member = z.infer<typeof MemberSchema>;

export const CallerSchema = z
  .object({
    workspace: WorkspaceSchema,
    member: MemberSchema.nullable().describe('The member acting; for an API key, the member who created it'),
    via: z.enum(['api_key', 'bearer', 'connection_token']),
    scope: z.enum(['read', 'write']),
  })
  .meta({ id: 'Caller' });

export const MemberListSchema = z.object({ members: z.array(MemberSchema) }).meta({ id: 'MemberList' });
