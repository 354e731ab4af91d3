// Original file: proto/maka/broker/v1/broker.proto

import type { CallToolResponse as _maka_broker_v1_CallToolResponse, CallToolResponse__Output as _maka_broker_v1_CallToolResponse__Output } from '../../../maka/broker/v1/CallToolResponse';

export interface WatchCallResponse {
  'event'?: (_maka_broker_v1_CallToolResponse | null);
}

export interface WatchCallResponse__Output {
  'event': (_maka_broker_v1_CallToolResponse__Output | null);
}
