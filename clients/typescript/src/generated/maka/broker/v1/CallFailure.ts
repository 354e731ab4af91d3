// Original file: proto/maka/broker/v1/broker.proto

import type { FailureCode as _maka_broker_v1_FailureCode, FailureCode__Output as _maka_broker_v1_FailureCode__Output } from '../../../maka/broker/v1/FailureCode';

export interface CallFailure {
  'code'?: (_maka_broker_v1_FailureCode);
  'message'?: (string);
}

export interface CallFailure__Output {
  'code': (_maka_broker_v1_FailureCode__Output);
  'message': (string);
}
