# The GenNi training / CLI image. Serving uses the official tensorflow/serving
# image on the exported SavedModels (see README).
FROM python:3.11-slim

ENV TF_USE_LEGACY_KERAS=1 \
    TF_CPU_ALLOCATOR_USE_BFC=true \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY setup.py README.md ./
COPY genni ./genni
COPY pipeline ./pipeline
COPY models ./models
COPY components ./components
RUN pip install '.[ann]'

ENTRYPOINT ["genni"]
CMD ["--help"]
