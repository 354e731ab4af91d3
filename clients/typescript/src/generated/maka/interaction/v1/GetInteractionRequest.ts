// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface GetInteractionRequest {
  'interaction_id'?: (string);
  'session_id'?: (string);
  'host_id'?: (string);
}

export interface GetInteractionRequest__Output {
  'interaction_id': (string);
  'session_id': (string);
  'host_id': (string);
}
