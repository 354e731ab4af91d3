// Original file: proto/maka/form/v1/form.proto


export interface Requester {
  'provider_id'?: (string);
  'provider_display_name'?: (string);
  'claimed_server'?: (string);
  'claimed_tool'?: (string);
}

export interface Requester__Output {
  'provider_id': (string);
  'provider_display_name': (string);
  'claimed_server': (string);
  'claimed_tool': (string);
}
