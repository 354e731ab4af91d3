// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface ListSurfacesRequest {
  'host_id'?: (string);
}

export interface ListSurfacesRequest__Output {
  'host_id': (string);
}
