/**
 * Bearer tokens are JWTs: `sub` is the identity-provider user id, `org_id` the workspace.
 * Development signs with an HS256 secret; a real identity provider is verified through its JWKS.
 */
import { SignJWT, createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';

export type TokenConfig =
  | { kind: 'secret'; secret: string; issuer?: string; audience?: string }
  | { kind: 'jwks'; url: string; issuer?: string; audience?: string };

export interface TokenClaims {
  sub: string;
  org_id: string;
}

export type TokenVerifier = (token: string) => Promise<TokenClaims | undefined>;

export const devIssuer = 'outreach-workspace-service';

export function createTokenVerifier(config: TokenConfig): TokenVerifier {
  const key =
    config.kind === 'secret' ? new TextEncoder().encode(config.secret) : createRemoteJWKSet(new URL(config.url));
  const options = {
    issuer: config.issuer,
    audience: config.audience,
    algorithms: config.kind === 'secret' ? ['HS256'] : undefined,
  };
  return async (token) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key as Parameters<typeof jwtVerify>[1], options));
    } catch {
      return undefined;
    }
    const orgId = payload.org_id;
    if (typeof payload.sub !== 'string' || typeof orgId !== 'string') return undefined;
    return { sub: payload.sub, org_id: orgId };
  };
}

export async function mintAccessToken(secret: string, claims: TokenClaims, ttlSeconds = 24 * 60 * 60): Promise<string> {
  return new SignJWT({ org_id: claims.org_id })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.sub)
    .setIssuer(devIssuer)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .sign(new TextEncoder().encode(secret));
}
