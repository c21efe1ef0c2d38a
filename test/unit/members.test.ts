import { describe, expect, it } from 'vitest';
import { decideMemberChange } from '../../domain/platform/members.js';
import type { Role } from '../../domain/shared/common.js';

const m = (id: string, role: Role) => ({ id, role });

describe('decideMemberChange', () => {
  const twoAdmins = [m('a1', 'admin'), m('a2', 'admin'), m('u1', 'member')];
  const oneAdmin = [m('a1', 'admin'), m('u1', 'member')];

  it('allows promoting a member and demoting an admin while another admin remains', () => {
    expect(decideMemberChange(oneAdmin, 'a1', { kind: 'role', memberId: 'u1', role: 'admin' })).toEqual({
      outcome: 'allowed',
      before: 'member',
      after: 'admin',
    });
    expect(decideMemberChange(twoAdmins, 'a1', { kind: 'role', memberId: 'a2', role: 'member' })).toEqual({
      outcome: 'allowed',
      before: 'admin',
      after: 'member',
    });
    // An admin may step down, or leave, when another admin remains.
    expect(decideMemberChange(twoAdmins, 'a1', { kind: 'role', memberId: 'a1', role: 'member' }).outcome).toBe(
      'allowed',
    );
    expect(decideMemberChange(twoAdmins, 'a1', { kind: 'remove', memberId: 'a1' })).toEqual({
      outcome: 'allowed',
      before: 'admin',
      after: null,
    });
  });

  it('allows removing a member', () => {
    expect(decideMemberChange(oneAdmin, 'a1', { kind: 'remove', memberId: 'u1' })).toEqual({
      outcome: 'allowed',
      before: 'member',
      after: null,
    });
  });

  it('refuses to demote or remove the last admin, whoever asks', () => {
    for (const change of [
      { kind: 'role', memberId: 'a1', role: 'member' },
      { kind: 'remove', memberId: 'a1' },
    ] as const) {
      const decision = decideMemberChange(oneAdmin, 'a1', change);
      expect(decision.outcome).toBe('refused');
      expect(decision).toMatchObject({ detail: expect.stringMatching(/last admin/) });
    }
  });

  it('changes nothing when the member already has the role', () => {
    expect(decideMemberChange(oneAdmin, 'a1', { kind: 'role', memberId: 'u1', role: 'member' })).toEqual({
      outcome: 'unchanged',
    });
    expect(decideMemberChange(oneAdmin, 'a1', { kind: 'role', memberId: 'a1', role: 'admin' })).toEqual({
      outcome: 'unchanged',
    });
  });

  it('answers not found for an id that is not a member of the workspace', () => {
    expect(decideMemberChange(oneAdmin, 'a1', { kind: 'remove', memberId: 'elsewhere' })).toEqual({
      outcome: 'not_found',
    });
  });

  it('refuses an actor who is no longer an admin, or no longer a member', () => {
    const demoted = [m('a1', 'member'), m('a2', 'admin')];
    expect(decideMemberChange(demoted, 'a1', { kind: 'role', memberId: 'a2', role: 'member' }).outcome).toBe(
      'forbidden',
    );
    expect(decideMemberChange(oneAdmin, 'gone', { kind: 'remove', memberId: 'u1' }).outcome).toBe('forbidden');
    expect(decideMemberChange(oneAdmin, null, { kind: 'remove', memberId: 'u1' }).outcome).toBe('forbidden');
  });
});
