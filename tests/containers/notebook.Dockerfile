# A stand-in for a Jupyter image (docs/notebooks.md): the fusefs image with
# the notebook user of the Jupyter Docker Stacks (jovyan, uid 1000) and no
# root at run time.  tests/integration/test_containers.py builds it on the
# image made by scripts/image.sh:
#   podman build --build-arg FUSEFS_IMAGE=localhost/fusefs:0.1.0 \
#       -f tests/containers/notebook.Dockerfile tests/containers
ARG FUSEFS_IMAGE=localhost/fusefs:0.1.0
FROM ${FUSEFS_IMAGE}
RUN useradd --create-home --uid 1000 --user-group --shell /bin/bash jovyan
USER 1000
WORKDIR /home/jovyan
ENV HOME=/home/jovyan
ENTRYPOINT []
CMD ["bash"]
