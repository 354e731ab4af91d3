// Original file: proto/maka/broker/v1/broker.proto

import type { ToolDescriptor as _maka_broker_v1_ToolDescriptor, ToolDescriptor__Output as _maka_broker_v1_ToolDescriptor__Output } from '../../../maka/broker/v1/ToolDescriptor';

export interface ToolsChanged {
  'tools'?: (_maka_broker_v1_ToolDescriptor)[];
}

export interface ToolsChanged__Output {
  'tools': (_maka_broker_v1_ToolDescriptor__Output)[];
}
