import { useEffect, useState } from "react";

/** The models the gateway serves (`GET /v1/models`), for the model picker. */
export function useModels() {
  const [models, setModels] = useState({ list: [], error: "" });
  useEffect(() => {
    fetch("/v1/models")
      .then((response) => (response.ok ? response.json() : Promise.reject(response.statusText)))
      .then(({ data }) => setModels({ list: data.map((model) => model.id), error: "" }))
      .catch((reason) => setModels({ list: [], error: `no models: ${reason}` }));
  }, []);
  return models;
}
