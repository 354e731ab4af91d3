// Original file: proto/maka/interaction/v1/interaction.proto

import type { PrincipalKind as _maka_interaction_v1_PrincipalKind, PrincipalKind__Output as _maka_interaction_v1_PrincipalKind__Output } from '../../../maka/interaction/v1/PrincipalKind';

export interface AnsweredBy {
  'principal'?: (string);
  'principal_kind'?: (_maka_interaction_v1_PrincipalKind);
  'surface_kind'?: (string);
  'issuer'?: (string);
  'via'?: (string);
}

export interface AnsweredBy__Output {
  'principal': (string);
  'principal_kind': (_maka_interaction_v1_PrincipalKind__Output);
  'surface_kind': (string);
  'issuer': (string);
  'via': (string);
}
