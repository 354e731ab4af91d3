// Original file: proto/maka/broker/v1/broker.proto

import type { Tool as _maka_broker_v1_Tool, Tool__Output as _maka_broker_v1_Tool__Output } from '../../../maka/broker/v1/Tool';
import type { Long } from '@grpc/proto-loader';

export interface WatchToolsResponse {
  'revision'?: (number | string | Long);
  'tools'?: (_maka_broker_v1_Tool)[];
  'host_id'?: (string);
}

export interface WatchToolsResponse__Output {
  'revision': (string);
  'tools': (_maka_broker_v1_Tool__Output)[];
  'host_id': (string);
}
