// Original file: proto/maka/broker/v1/broker.proto

import type { Tool as _maka_broker_v1_Tool, Tool__Output as _maka_broker_v1_Tool__Output } from '../../../maka/broker/v1/Tool';

export interface ListToolsResponse {
  'tools'?: (_maka_broker_v1_Tool)[];
}

export interface ListToolsResponse__Output {
  'tools': (_maka_broker_v1_Tool__Output)[];
}
