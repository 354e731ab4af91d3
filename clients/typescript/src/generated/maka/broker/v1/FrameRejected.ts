// Original file: proto/maka/broker/v1/broker.proto

import type { RejectReason as _maka_broker_v1_RejectReason, RejectReason__Output as _maka_broker_v1_RejectReason__Output } from '../../../maka/broker/v1/RejectReason';

export interface FrameRejected {
  'reason'?: (_maka_broker_v1_RejectReason);
  'invocation_id'?: (string);
  'message'?: (string);
}

export interface FrameRejected__Output {
  'reason': (_maka_broker_v1_RejectReason__Output);
  'invocation_id': (string);
  'message': (string);
}
