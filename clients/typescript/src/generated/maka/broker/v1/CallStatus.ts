// Original file: proto/maka/broker/v1/broker.proto

import type { CallPhase as _maka_broker_v1_CallPhase, CallPhase__Output as _maka_broker_v1_CallPhase__Output } from '../../../maka/broker/v1/CallPhase';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface CallStatus {
  'invocation_id'?: (string);
  'phase'?: (_maka_broker_v1_CallPhase);
  'interaction_id'?: (string);
  'interaction_expires_at'?: (_google_protobuf_Timestamp | null);
  'watchers'?: (number);
}

export interface CallStatus__Output {
  'invocation_id': (string);
  'phase': (_maka_broker_v1_CallPhase__Output);
  'interaction_id': (string);
  'interaction_expires_at': (_google_protobuf_Timestamp__Output | null);
  'watchers': (number);
}
