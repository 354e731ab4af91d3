// Original file: proto/maka/broker/v1/broker.proto

import type { SignInState as _maka_broker_v1_SignInState, SignInState__Output as _maka_broker_v1_SignInState__Output } from '../../../maka/broker/v1/SignInState';

export interface SignInStatus {
  'server'?: (string);
  'state'?: (_maka_broker_v1_SignInState);
  'authorization_url'?: (string);
}

export interface SignInStatus__Output {
  'server': (string);
  'state': (_maka_broker_v1_SignInState__Output);
  'authorization_url': (string);
}
