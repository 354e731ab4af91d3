// Original file: proto/maka/interaction/v1/interaction.proto


export interface Binding {
  'session_id'?: (string);
  'turn_id'?: (string);
  'tool_use_id'?: (string);
  'invocation_id'?: (string);
  'registration_id'?: (string);
  'connection_id'?: (string);
  'provider_correlation_id'?: (string);
  'tool_name'?: (string);
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
}
