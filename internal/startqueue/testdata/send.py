"""Send one request to the lambdasaga start queue, with boto3 alone.

  send.py QUEUE_URL start SAGA ID INPUT_JSON
  send.py QUEUE_URL signal ID NAME PAYLOAD_JSON DELIVERY
  send.py QUEUE_URL callback TOKEN OUTPUT_JSON
  send.py QUEUE_URL fail TOKEN TYPE MESSAGE

Credentials, region and endpoint come from the usual AWS environment
(AWS_ENDPOINT_URL_SQS points it at an emulator). It prints the message id.
"""
import json
import sys

import boto3


def request(kind, args):
    if kind == "start":
        saga, saga_id, input_json = args
        return {"start": {"saga": saga, "id": saga_id, "input": json.loads(input_json)}}
    if kind == "signal":
        saga_id, name, payload_json, delivery = args
        return {"signal": {"id": saga_id, "name": name, "payload": json.loads(payload_json), "delivery": delivery}}
    if kind == "callback":
        token, output_json = args
        return {"callback": {"token": token, "output": json.loads(output_json)}}
    if kind == "fail":
        token, error_type, message = args
        return {"callback": {"token": token, "error": {"type": error_type, "message": message}}}
    raise SystemExit("unknown request kind " + repr(kind))


def main():
    queue_url, kind, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    sqs = boto3.client("sqs")
    out = sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(request(kind, args)))
    print(out["MessageId"])


if __name__ == "__main__":
    main()
