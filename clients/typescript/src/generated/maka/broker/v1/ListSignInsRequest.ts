// Original file: proto/maka/broker/v1/broker.proto


export interface ListSignInsRequest {
}

export interface ListSignInsRequest__Output {
}
