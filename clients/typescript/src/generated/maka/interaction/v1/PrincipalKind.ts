// Original file: proto/maka/interaction/v1/interaction.proto

export const PrincipalKind = {
  PRINCIPAL_KIND_UNSPECIFIED: 'PRINCIPAL_KIND_UNSPECIFIED',
  PRINCIPAL_KIND_TOKEN: 'PRINCIPAL_KIND_TOKEN',
  PRINCIPAL_KIND_ANONYMOUS: 'PRINCIPAL_KIND_ANONYMOUS',
  PRINCIPAL_KIND_OIDC: 'PRINCIPAL_KIND_OIDC',
} as const;

export type PrincipalKind =
  | 'PRINCIPAL_KIND_UNSPECIFIED'
  | 0
  | 'PRINCIPAL_KIND_TOKEN'
  | 1
  | 'PRINCIPAL_KIND_ANONYMOUS'
  | 2
  | 'PRINCIPAL_KIND_OIDC'
  | 3

export type PrincipalKind__Output = typeof PrincipalKind[keyof typeof PrincipalKind]
