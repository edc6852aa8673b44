"""Prepares a moto S3 server (started with INITIAL_NO_AUTH_ACTION_COUNT=3) for the remote-shard
tests: an IAM user with an access key and an allow-all policy (the three unauthenticated calls),
then, signed with that key, a bucket holding the given files under a prefix.
Usage: s3_setup.py ENDPOINT BUCKET PREFIX FILE...   Prints "KEY_ID SECRET"."""
import os
import sys

import boto3

endpoint, bucket, prefix, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
anon = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **anon)
iam.create_user(UserName="pinfeed-test")
key = iam.create_access_key(UserName="pinfeed-test")["AccessKey"]
iam.put_user_policy(UserName="pinfeed-test", PolicyName="all",
                    PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}')
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key["AccessKeyId"],
                  aws_secret_access_key=key["SecretAccessKey"])
s3.create_bucket(Bucket=bucket)
for f in files:
    with open(f, "rb") as body:
        s3.put_object(Bucket=bucket, Key=prefix + os.path.basename(f), Body=body)
print(key["AccessKeyId"], key["SecretAccessKey"])
