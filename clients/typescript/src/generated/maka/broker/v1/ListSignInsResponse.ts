// Original file: proto/maka/broker/v1/broker.proto

import type { SignInStatus as _maka_broker_v1_SignInStatus, SignInStatus__Output as _maka_broker_v1_SignInStatus__Output } from '../../../maka/broker/v1/SignInStatus';

export interface ListSignInsResponse {
  'sign_ins'?: (_maka_broker_v1_SignInStatus)[];
}

export interface ListSignInsResponse__Output {
  'sign_ins': (_maka_broker_v1_SignInStatus__Output)[];
}
