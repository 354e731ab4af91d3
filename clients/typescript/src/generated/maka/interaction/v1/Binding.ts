// Original file: proto/maka/interaction/v1/interaction.proto

import type { Person as _maka_interaction_v1_Person, Person__Output as _maka_interaction_v1_Person__Output } from '../../../maka/interaction/v1/Person';

export interface Binding {
  'session_id'?: (string);
  'turn_id'?: (string);
  'tool_use_id'?: (string);
  'invocation_id'?: (string);
  'registration_id'?: (string);
  'connection_id'?: (string);
  'provider_correlation_id'?: (string);
  'tool_name'?: (string);
  'made_for'?: (_maka_interaction_v1_Person | null);
}

export interface Binding__Output {
  'session_id': (string);
  'turn_id': (string);
  'tool_use_id': (string);
  'invocation_id': (string);
  'registration_id': (string);
  'connection_id': (string);
  'provider_correlation_id': (string);
  'tool_name': (string);
  'made_for': (_maka_interaction_v1_Person__Output | null);
}
