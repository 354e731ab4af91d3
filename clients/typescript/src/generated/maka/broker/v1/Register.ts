// Original file: proto/maka/broker/v1/broker.proto

import type { ToolDescriptor as _maka_broker_v1_ToolDescriptor, ToolDescriptor__Output as _maka_broker_v1_ToolDescriptor__Output } from '../../../maka/broker/v1/ToolDescriptor';

export interface Register {
  'provider_id'?: (string);
  'display_name'?: (string);
  'tools'?: (_maka_broker_v1_ToolDescriptor)[];
}

export interface Register__Output {
  'provider_id': (string);
  'display_name': (string);
  'tools': (_maka_broker_v1_ToolDescriptor__Output)[];
}
