import { z } from 'zod';
import { lineSchema, NameSchema, PlanSchema, RoleSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

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

export const SignUpSchema = z
  .object({
    name: NameSchema.describe('The workspace’s name'),
    referral_code: lineSchema(1, 64).optional().describe('A referral code another workspace shared'),
    affiliate_code: lineSchema(1, 64).optional().describe('An affiliate’s code, when no click id is known'),
    affiliate_click_id: UuidSchema.optional().describe(
      'The click id an affiliate link handed out (honoured within the cookie window); wins over `affiliate_code`',
    ),
  })
  .meta({ id: 'SignUp' });
export type SignUp = z.infer<typeof SignUpSchema>;

export const SignedUpSchema = z
  .object({ workspace: WorkspaceSchema, member: MemberSchema.describe('The person who signed up: its admin') })
  .meta({ id: 'SignedUp' });
